"""The values the package cannot type, each named for why: its only uses of ``Any``.

- :data:`Json`: a decoded JSON value (a golden file, a results file, a cache manifest): arbitrary
  by nature; the code that reads one checks its shape and says what is wrong in one line.
- :data:`Upstream`: an object of a package that ships no type information (executorch's runtime
  ``Program``/``MethodMeta`` and its flatbuffer plan, its quantizer and recipe objects, torchao's
  observers, values in an fx node's ``meta``): typed at the seam by what the harness reads of it.
"""
from __future__ import annotations

from typing import Any

Json = Any  # a decoded JSON value: arbitrary by nature, checked where it is read
Upstream = Any  # an object of a package without type information (executorch, torchao)
