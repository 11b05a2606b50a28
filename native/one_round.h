/* A one-round test's op summaries built from its round's integer sums.
 *
 * opprof_install_summary_functions(id(module)) takes the GIL and sets on that
 * module two builtins:
 *   one_round_ops(keys, sums, memory_key, exact, op_type, op_names, stats_type,
 *                 stats_names) -> (ops, op_count, self_flops, device_ns) or None
 *   keys: list of str, one per row of sums (a list of rows, each
 *   OPPROF_GROUP_COLUMNS ints); ops: dict key -> op_type object, in key order,
 *   each with stats_type objects of one sample, as gate.summary._one_round_op
 *   builds them; op_count: the counts of every key but memory_key; self_flops:
 *   every row's self FLOPs; device_ns: every row's self device time, or None
 *   when no row has device time.  None (build it in Python) where a key repeats
 *   or a figure is not an int strictly within (-exact, exact): such figures
 *   take the rows' float arithmetic there.
 *   stored_ops(ops, op_type, op_names, stats_type, stats_names) -> dict or None
 *   OpSummary.as_stored of each op of the dict ops, in key order, where every
 *   time of every op has one sample (TimeStats.single's form): times rounded
 *   to three significant digits as jsonio.round_sig rounds them.  None where
 *   some time has more samples (Python rounds those).
 * op_names and stats_names: tuples of the field names filled, in this order:
 *   an op's key, count, self CPU time, CPU time (the self CPU time's object
 *   when equal), self bytes, bytes, FLOPs, self device time, device time
 *   (both None when no device time), ranges (a new empty dict), self device
 *   bytes (0: the sums carry no device memory); a time's
 *   samples (a tuple of one), median, min, max, mean (each the sample), stdev
 *   and MAD (each 0).  Another number of names raises TypeError.
 * Returns OPPROF_OK, or an error code with opprof_last_error() set. */
int opprof_install_summary_functions(intptr_t module_id);
