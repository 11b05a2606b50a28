"""Capture: the recorder and its scopes over the native core, the op sources.

The first room of the data path: a :class:`~pytest_opprof.capture.recorder.Recorder`
starts the sources (numpy, torch, CUDA, memory), the native core records op
events, and a stop drains them into
:class:`~pytest_opprof.native_layout.records.Records`, which the event model
reads.  Capture imports neither the model nor the renderers: ``profile`` puts the
three together above them (``pytest_opprof/profiler.py``).
"""
