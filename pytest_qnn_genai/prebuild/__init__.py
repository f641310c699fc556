"""Builds scheduled ahead: once collection knows the selected tests, the cache entries they will
ask for are built in a background process, in dependency order, instead of when a test asks.

- :mod:`.plan`: which products the selected items need, a walk of the product graph
  (:mod:`pytest_qnn_genai.pipeline.products`; pytest-free: the plugin describes items);
- :mod:`.schedule`: running steps in dependency order on bounded lanes;
- :mod:`.process`: the background process (``python -m pytest_qnn_genai.prebuild PLAN``),
  building through the same Pipeline and cache as the tests;
- :mod:`.launch`: starting and stopping it from a session.

A test that needs an entry being built waits on the key's lock (the cache's one-build-per-key
rule) and finds a hit; a prebuild failure only means the test builds the entry itself and
reports the error. ``--no-qnn-prebuild`` turns it off.
"""
