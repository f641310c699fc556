"""Model cases: the registry of ``models/<name>/case.json`` folders, the llama2.c checkpoint layout,
and the project's own trained default model (corpus and trainer)."""
