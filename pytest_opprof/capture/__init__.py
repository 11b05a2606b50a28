"""Capture: the profile and its scopes over the native core, the op sources, the records.

The first room of the data path: ``profile()`` starts the sources (numpy, torch,
CUDA, memory), the native core records op events, and a stop drains them into
:class:`~pytest_opprof.capture.records.Records`, which the event model reads.
"""
