"""The C core's event layout as Python reads it: the records array and the shape table.

``records.py`` mirrors ``struct opprof_event`` (``native/opprof.h``) and holds one
drained session; ``shape_table.py`` decodes a drain's copied shape entries on
first use.  Neither imports the compiled extension (``_native.py`` is the one
door to C, and passes the decoder in), so capture, the event model and the gate
read records without loading the core.
"""
