"""The rules of each runtime's settings (``runtime``): what ``conf/runtime/<name>.yaml``
declares, checked with the rest of the configuration before any process starts."""

from __future__ import annotations

from collections.abc import Callable

from omegaconf import DictConfig

from fedimb.core.errors import check_number, is_number, require

#: the simulation's nodes at most with ``runtime.nodes=auto`` where any node can serve any
#: client: Flower's engine asks for a message to each node every 0.1 s, so 100 nodes feed
#: up to 1,000 instructions a second to the actors, and its work (and the nodes'
#: registration before round 1) no longer grows with the idle clients
POOL_NODES = 100


def client_setting(cfg: DictConfig, key: str) -> str:
    """``runtime.client_ids`` or ``runtime.client_state``."""
    return str(cfg.runtime[key])


def gpus_per_client(cfg: DictConfig) -> float:
    """Ray's GPU share per virtual client (``runtime.num_gpus_per_client``, a setting of
    the simulation only): the runtimes without Ray reserve no GPU for a client."""
    return float(cfg.runtime.num_gpus_per_client) if cfg.runtime.name == "simulation" else 0.0


def rejoin_timeout(cfg: DictConfig) -> float:
    """Seconds a later round waits for every node to be connected
    (``runtime.rejoin_timeout``, a setting of the deployment): only deployed nodes are
    lost and come back, so the other runtimes never wait."""
    return float(cfg.runtime.rejoin_timeout) if cfg.runtime.name == "deployment" else 0.0


def check_runtime(cfg: DictConfig) -> None:
    """The chosen runtime's own rules, then the rules every runtime shares."""
    r = cfg.runtime
    require(
        r.get("name") in RUNTIMES,
        f"unknown runtime '{r.get('name')}' (choose from: {', '.join(RUNTIMES)})",
    )
    RUNTIMES[r.name](cfg)
    check_shared_settings(r)


def check_simulation(cfg: DictConfig) -> None:
    """Ray's resources per virtual client and the Ray cluster to join."""
    r = cfg.runtime
    check_number("runtime.num_cpus_per_client", r.num_cpus_per_client, 1, integer=True)
    address = r.get("ray_address")
    require(
        address is None or (isinstance(address, str) and (address == "auto" or ":" in address)),
        f"runtime.ray_address must be host:port, auto or null, got {address!r}",
    )
    check_gpus_per_client(cfg)
    check_client_ids(cfg)
    check_client_state(cfg)
    check_nodes(cfg)
    require(
        address is None or r.get("client_state") != "disk",
        f"runtime.client_state=disk keeps the clients' state on this machine, but "
        f"runtime.ray_address={address} may run them on others: set runtime.client_state=auto "
        f"or memory",
    )


def check_client_ids(cfg: DictConfig) -> None:
    """``runtime.client_ids``: where every node can serve any client (the simulation's and
    the in-process nodes hold the whole data set), the server may assign them."""
    value = client_setting(cfg, "client_ids")
    require(
        value in ("assigned", "claimed"),
        f"runtime.client_ids must be assigned or claimed, got {value!r}",
    )


def check_client_state(cfg: DictConfig) -> None:
    """``runtime.client_state``: where one process serves many clients, their state
    between rounds may go to disk."""
    value = client_setting(cfg, "client_state")
    require(
        value in ("auto", "disk", "memory"),
        f"runtime.client_state must be auto, disk or memory, got {value!r}",
    )


def client_state_kind(cfg: DictConfig) -> str:
    """Where the run's clients keep their state: ``disk`` or ``memory``; ``auto`` is disk
    unless ``runtime.ray_address`` names a Ray cluster, whose actors may run on machines
    that do not share this one's disk."""
    value = client_setting(cfg, "client_state")
    if value == "auto":
        return "memory" if cfg.runtime.get("ray_address") else "disk"
    return value


def check_nodes(cfg: DictConfig) -> None:
    """``runtime.nodes`` (simulation): auto, or a count from 1 to num_clients; fewer nodes
    than clients only where any node can serve any client (:func:`pools_clients`)."""
    nodes, clients = cfg.runtime.nodes, int(cfg.num_clients)
    require(
        nodes == "auto" or (type(nodes) is int and 1 <= nodes <= clients),
        f"runtime.nodes must be auto or a whole number from 1 to num_clients ({clients}), "
        f"got {nodes!r}",
    )
    require(
        nodes in ("auto", clients) or pools_clients(cfg),
        f"runtime.nodes={nodes} lends each node to several of the {clients} clients, which "
        "needs runtime.client_ids=assigned and runtime.client_state=disk (or auto without a "
        "ray_address)",
    )


def pools_clients(cfg: DictConfig) -> bool:
    """Whether any node can serve any client: the server names the client in every
    instruction and clients keep their state on disk, not in a node's Context."""
    return assigns_clients(cfg) and client_state_kind(cfg) == "disk"


def node_count(cfg: DictConfig) -> int:
    """The nodes the runtime starts: one per client, but the simulation's ``runtime.nodes``
    (auto: at most :data:`POOL_NODES` where any node can serve any client)."""
    clients = int(cfg.num_clients)
    if cfg.runtime.name != "simulation":
        return clients
    nodes = cfg.runtime.nodes
    if nodes == "auto":
        return min(clients, POOL_NODES) if pools_clients(cfg) else clients
    return int(nodes)


def check_deployment(cfg: DictConfig) -> None:
    """The SuperLink's address; no Ray settings."""
    r = cfg.runtime
    require(
        isinstance(r.get("address"), str) and ":" in r.address,
        f"runtime.address must be host:port, got {r.get('address')!r}",
    )
    refuse_gpus_per_client(cfg)
    require(
        client_setting(cfg, "client_ids") == "claimed",
        "runtime.client_ids=assigned is a setting of the simulation and in process: a "
        "SuperNode serves the partition or the data it was started with",
    )
    require(
        client_setting(cfg, "client_state") == "memory",
        "runtime.client_state=disk is a setting of the simulation and in process: a SuperNode "
        "keeps its one client's state in Flower's Context.state",
    )


def check_in_process(cfg: DictConfig) -> None:
    """One process: no Ray settings."""
    refuse_gpus_per_client(cfg)
    check_client_ids(cfg)
    check_client_state(cfg)


def check_gpus_per_client(cfg: DictConfig) -> None:
    """``runtime.num_gpus_per_client``: Ray's GPU share per virtual client (Flower's
    ``client-resources-num-gpus``); a GPU reserved for clients that ``device=cpu`` keeps
    off it would only idle."""
    gpus = cfg.runtime.num_gpus_per_client
    require(
        is_number(gpus) and gpus >= 0,
        f"runtime.num_gpus_per_client must be a number >= 0 (0.25: four clients share a GPU), "
        f"got {gpus!r}",
    )
    require(
        gpus == 0 or cfg.device != "cpu",
        f"runtime.num_gpus_per_client={gpus} reserves GPUs, but device=cpu keeps the clients "
        f"off them: use device=auto or device=cuda, or runtime.num_gpus_per_client=0",
    )


def refuse_gpus_per_client(cfg: DictConfig) -> None:
    """Only the simulation has Ray's ``num_gpus_per_client``."""
    name = cfg.runtime.name
    require(
        "num_gpus_per_client" not in cfg.runtime,
        f"runtime.num_gpus_per_client is a setting of runtime=simulation (Ray's GPUs per "
        f"virtual client), not of runtime={name}; there device=auto or device=cuda puts the "
        f"clients on a GPU",
    )


def check_shared_settings(r: DictConfig) -> None:
    """Timeouts and waits (where a runtime has them) and ``detach``."""
    for key in ("round_timeout", "connect_timeout"):
        value = r.get(key)
        require(
            value is None or (is_number(value) and value > 0),
            f"runtime.{key} must be a positive number of seconds or null (no limit), got {value!r}",
        )
    if "rejoin_timeout" in r:
        require(
            is_number(r.rejoin_timeout) and r.rejoin_timeout >= 0,
            f"runtime.rejoin_timeout must be a number of seconds >= 0 (0: no wait), "
            f"got {r.rejoin_timeout!r}",
        )
    if "wait_for_nodes" in r:
        require(
            is_number(r.wait_for_nodes) and r.wait_for_nodes >= 0,
            f"runtime.wait_for_nodes must be a number of seconds >= 0 (0: check once), "
            f"got {r.wait_for_nodes!r}",
        )
    if "reattach_seconds" in r:
        require(
            is_number(r.reattach_seconds) and r.reattach_seconds > 0,
            f"runtime.reattach_seconds must be a positive number of seconds, "
            f"got {r.reattach_seconds!r}",
        )
    require(
        "detach" not in r or isinstance(r.detach, bool),
        f"runtime.detach must be true or false, got {r.get('detach')!r}",
    )


def assigns_clients(cfg: DictConfig) -> bool:
    """Whether the server assigns clients to nodes (``runtime.client_ids=assigned``, the
    default of the simulation and in process)."""
    return client_setting(cfg, "client_ids") == "assigned"


#: each runtime's own rules, by name (``runtime=<name>``)
RUNTIMES: dict[str, Callable[[DictConfig], None]] = {
    "simulation": check_simulation,
    "deployment": check_deployment,
    "in_process": check_in_process,
}
