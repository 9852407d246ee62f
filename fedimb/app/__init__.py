"""The application layer: configuration, the round loop, the Flower apps."""

import time as _time

#: when this process began importing the application (wall clock): where a client's imports start
IMPORTED_AT = _time.time()
