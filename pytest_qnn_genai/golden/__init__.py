"""Committed expectations: golden continuations, perf floors, syrupy snapshots.

They change only under an explicit flag (``--qnn-update-golden``, syrupy's ``--snapshot-update``):
:func:`pytest_qnn_genai.golden.updates.write` is the one way this package writes a golden file
(atomically, one line per changed figure, and journalled so the run reports the test as
*updated*, never *passed*). Loading is strict: a damaged file is one line naming the file.
"""
