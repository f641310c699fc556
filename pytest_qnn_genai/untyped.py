"""The package's seams with values it does not type itself, each named for why.

- :data:`Json`: a decoded JSON value whose shape the code that reads it checks (a results file of
  any age, a run fingerprint, a user's ``case.json`` ``extra``, a static_llama graph's metadata,
  a constant method's value): arbitrary by nature until that check, which says what is wrong in
  one line. Where the package writes a document and reads it back, its shape is a ``TypedDict``
  beside its writer instead (the cache's ``Manifest``, a results ``RecordDict``, ``qdq.json``'s
  ``QdqData``, ``CompileSpecData``, a model case's ``ModelParams``).
- :data:`JsonValue`: a JSON tree the code builds without a fixed shape; typed, so a reader
  narrows it first.
- :data:`Upstream`: an object of a package that ships no type information (executorch's
  quantizer, recipe and ``static_llama`` objects and its example inputs, torchao's observers, an
  fsspec filesystem, the EValues a method returns) that the harness hands back to that package or
  reads too many attributes of to restate. Where it reads a few, a ``Protocol`` says which:
  :class:`Tokenizer` here, the runtime's ``Program``/``MethodMeta``/``Method`` in
  :mod:`pytest_qnn_genai.runtime.programs`, the flatbuffer plan in
  :mod:`pytest_qnn_genai.runtime.pte_info`.

These and the few direct ``Any`` (an option parser's value, a variant's field overrides) are the
package's only ``Any``: tests/unit/test_typing_budget.py counts them against a budget.
"""
from __future__ import annotations

from typing import Any, Protocol, TypeAlias

Json = Any  # a decoded JSON value: arbitrary by nature, checked where it is read
Upstream = Any  # an object of a package without type information (executorch, torchao)

JsonValue: TypeAlias = "str | int | float | bool | None | list[JsonValue] | dict[str, JsonValue]"
JsonObject: TypeAlias = "dict[str, JsonValue]"


class Tokenizer(Protocol):
    """A ``pytorch_tokenizers`` tokenizer (``Llama2cTokenizer``, ``TiktokenTokenizer``,
    ``HuggingFaceTokenizer``) as the harness calls it: by keyword, as llama.py does."""

    def encode(self, s: str, *, bos: bool, eos: bool) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


class SpecialTokens(Tokenizer, Protocol):
    """A tokenizer that names its BOS/EOS ids and its size (``TiktokenTokenizer``)."""

    bos_id: int
    eos_id: int
    n_words: int
