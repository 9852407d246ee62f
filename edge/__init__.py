"""Edge images built and proven on this machine: a Debian root for the device's
architecture (mmdebstrap), wheels for it (PyPI), an image built with whichever container
engine is present, and arm64 run under QEMU user emulation.

    python -m edge image --arch arm64      # make edge-image ARCH=arm64
    python -m edge setup --arch arm64      # only the engine and binfmt set-up

Nothing here is imported by fedimb itself: the package is the tooling around docker/.
"""
