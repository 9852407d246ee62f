"""A warm ClientApp launcher for one SuperNode.

Flower's SuperNode hands each message to a fresh ``flwr-clientapp`` process, which pays
Python, Flower and torch before it trains (seconds, more on a Raspberry Pi). Started with
``--isolation process``, the SuperNode leaves the launching to this worker instead: it has
imported torch and Flower once and forks for each message; the fork runs Flower's own
``run_clientapp`` with the task's token, so every message is still served by a process of
its own, as with Flower's launcher, only without the imports. The app's own packages
(fedimb, strategies, clients) are not imported here: each fork loads them from the
message's FAB, as ``flwr-clientapp`` does.

The worker talks only to its SuperNode's Runtime API on this machine (plain HTTP on the
loopback interface, as Flower's own launcher does) and exits with its SuperNode
(:func:`follow_node`), however that ends: SIGINT, SIGTERM, or on its own. ``fedimb
supernode`` (:mod:`fedimb.cli.federation.supernode`) starts a worker and its SuperNode together.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import subprocess
import sys
import threading
import time

#: imported once by the worker, so that no fork pays for them
PRELOAD = (
    "torch",
    "numpy",
    "omegaconf",
    "psutil",
    "flwr.clientapp",
    "flwr.supernode.runtime.run_clientapp",
)
#: where a fork records when it began: fedimb.app.server.phases reads it (the ClientApp's ``start``;
#: the worker does not import the app, whose modules each fork loads from its FAB)
STARTED_AT_VARIABLE = "FEDIMB_PROCESS_STARTED_AT"
#: the app's top-level packages (the FAB's): each fork imports them from its FAB
APP_PACKAGES = ("fedimb", "strategies", "clients")


def _forget_app_modules() -> None:
    for name in [m for m in sys.modules if m.split(".")[0] in APP_PACKAGES]:
        del sys.modules[name]


def _run_task(address: str, token: str) -> None:
    """In the fork: Flower's ClientApp process body for one task; never returns."""
    code = 1
    os.environ[STARTED_AT_VARIABLE] = repr(
        time.time()
    )  # the fork's own start (see fedimb.app.server.phases)
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        _forget_app_modules()
        from flwr.supernode.runtime.run_clientapp import run_clientapp

        run_clientapp(
            runtime_api_address=address, token=token, insecure=True, parent_pid=os.getppid()
        )
        code = 0
    except SystemExit as done:  # Flower ends the process with sys.exit
        code = done.code if isinstance(done.code, int) else 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _reap(children: dict[int, int]) -> None:
    """Forget the ClientApp processes that ended (``children``: pid -> task id); a
    failed one is logged here, its reason is in the SuperNode's log and the server's."""
    for pid, task in list(children.items()):
        try:
            finished, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            finished, status = pid, 0
        if finished:
            del children[pid]
            code = os.waitstatus_to_exitcode(status)
            if code != 0:
                print(f"task {task}: ClientApp process {pid} exited with code {code}", flush=True)


#: seconds a worker whose SuperNode is gone has to end its loop before it is terminated
FOLLOW_GRACE = 3.0


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """On Linux, have the kernel send ``sig`` to this process when its parent exits
    (``prctl(PR_SET_PDEATHSIG)``); elsewhere nothing (:func:`follow_node` still applies)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(sig))  # 1: PR_SET_PDEATHSIG


def node_alive(node_pid: int) -> bool:
    """Whether the SuperNode ``node_pid`` still runs (a zombie has ended)."""
    import psutil

    try:
        return psutil.Process(node_pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def follow_node(node_pid: int, interval: float = 0.2) -> None:
    """End this worker when its SuperNode ends. Where the SuperNode is the parent (``fedimb
    supernode``) the kernel signals its end; in every case a thread watches the node and
    then interrupts the loop, and terminates the worker if the interrupt is lost (caught
    on its way through Flower's connection retries, or ignored, as in a shell script's
    background job) and the loop has not ended within :data:`FOLLOW_GRACE` seconds."""
    if os.getppid() == node_pid:
        die_with_parent()
        if os.getppid() != node_pid:  # the node ended before the kernel was told
            os.kill(os.getpid(), signal.SIGTERM)

    def watch() -> None:
        while node_alive(node_pid):
            time.sleep(interval)
        signal.raise_signal(signal.SIGINT)
        time.sleep(FOLLOW_GRACE)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="follow-node", daemon=True).start()


def serve(address: str, node_pid: int | None, poll_interval: float) -> None:
    """Acquire the SuperNode's ClientApp tasks and fork one process per task."""
    if node_pid is not None:
        follow_node(node_pid)
    for module in PRELOAD:
        importlib.import_module(module)
    from flwr.proto.runtime_pb2 import AcquireTaskRequest  # pylint: disable=no-name-in-module
    from flwr.supercore.constant import TaskType
    from flwr.supercore.interceptors import RuntimeVersionHttpInterceptor
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient

    client = RuntimeHttpClient.from_server_address(
        server_address=address,
        insecure=True,
        root_certificates=None,
        interceptors=[RuntimeVersionHttpInterceptor(component_name="SuperExec")],
        retry_invoker=make_simple_http_retry_invoker(),
    )
    request = AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP.value])
    children: dict[int, int] = {}
    print(f"fedimb node worker {os.getpid()}: serving ClientApp tasks of {address}", flush=True)
    threading.Thread(
        target=lambda: print(f"fedimb node worker: {cuda_visibility()}", flush=True), daemon=True
    ).start()
    try:
        while True:
            _reap(children)
            if not launch_next_task(client, request, address, children):
                time.sleep(poll_interval)
    except KeyboardInterrupt:
        pass
    finally:
        client.close()


def cuda_visibility() -> str:
    """Whether this node's ClientApps see a CUDA device (said once, when the node starts; a
    Jetson's image is built for it). Asked in a child process: CUDA initialised here
    would be unusable in every fork."""
    import torch

    if torch.version.cuda is None:
        return f"torch {torch.__version__}, built without CUDA"
    probe = (
        "import torch; n = torch.cuda.device_count() if torch.cuda.is_available() else 0; "
        "print(n, torch.cuda.get_device_name(0) if n else '')"
    )
    build = f"torch {torch.__version__} with CUDA {torch.version.cuda}"
    try:
        answer = subprocess.run(
            [sys.executable, "-P", "-c", probe],  # -P: not the working directory's modules
            capture_output=True,
            text=True,
            timeout=300,
            preexec_fn=die_with_parent,
        )
        count, _, name = answer.stdout.strip().partition(" ")
        visible = int(count)
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return f"{build}: could not ask whether a device is visible"
    if visible == 0:
        return f"{build}: no CUDA device visible"
    return f"{build}: {visible} CUDA device(s) visible, {name}"


def launch_next_task(client, request, address: str, children: dict[int, int]) -> bool:
    """Fork a ClientApp process for the SuperNode's next task, if there is one. A failure
    (the Runtime API not answering, no memory to fork) is logged in one line and the
    worker goes on: the task's token expires and Flower reports the message as failed."""
    try:
        reply = client.AcquireTask(request)
        if not (reply.HasField("task") and reply.token):
            return False
        pid = os.fork()
    except Exception as err:  # noqa: BLE001 - a worker that stops would silence its node
        print(f"fedimb node worker: {type(err).__name__}: {err}", flush=True)
        return False
    if pid == 0:
        _run_task(address, reply.token)
    children[pid] = reply.task.task_id
    print(f"task {reply.task.task_id}: ClientApp process {pid}", flush=True)
    return True


def worker_arguments(runtime_api_address: str, node_pid: int) -> list[str]:
    """The command that starts a SuperNode's worker."""
    return [
        sys.executable,
        "-P",  # the working directory stays off sys.path (see fedimb/__main__.py)
        "-m",
        "fedimb.cli.federation.node_worker",
        "--runtime-api-address",
        runtime_api_address,
        "--node-pid",
        str(node_pid),
    ]


def main(argv: list[str] | None = None) -> int:
    from flwr.supercore.constant import SUPERNODE_UVICORN_DEFAULT_PORT, UVICORN_DEFAULT_HOST

    parser = argparse.ArgumentParser(prog="fedimb node-worker", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runtime-api-address",
        default=f"{UVICORN_DEFAULT_HOST}:{SUPERNODE_UVICORN_DEFAULT_PORT}",
        help="the SuperNode's Runtime API (its --host and --port)",
    )
    parser.add_argument(
        "--node-pid", type=int, default=None, help="exit when this process (the SuperNode) exits"
    )
    parser.add_argument(
        "--poll-interval", type=float, default=0.25, help="seconds between polls for a task"
    )
    args = parser.parse_args(argv)
    try:
        serve(args.runtime_api_address, args.node_pid, args.poll_interval)
    except KeyboardInterrupt:  # the SuperNode exited (or Ctrl-C) before the loop began
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
