"""The C core's event layout as Python reads it: the records array and its tables.

``records.py`` mirrors ``struct opprof_event`` (``native/opprof.h``) and holds one
drained session; ``shape_table.py`` decodes a drain's copied shape entries on
first use; ``parents.py`` resolves each record's parent id to its row.  None of
them loads the compiled extension on import (``_native.py`` is the one door to
C: it passes the decoder in, and ``parents.py`` calls it on first use), so
capture, the event model and the gate import records without loading the core.
"""
