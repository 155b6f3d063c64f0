"""aipusim's exceptions under their public name; they are defined in `aipusim.base.errors`
(the foundation the packages import without loading the API).

>>> from aipusim.errors import AipuSimError, ConfigError
>>> issubclass(ConfigError, AipuSimError)
True
"""

from __future__ import annotations

from aipusim.base.errors import *  # noqa: F403 (the whole hierarchy, re-exported)
from aipusim.base.errors import __all__  # noqa: F401
