"""The gate: a test's figures judged against its stored baseline, and baselines kept.

Summary figures -> tolerances -> verdict (speed-scaled, with the Mann-Whitney
statistic) -> the baseline store, pooling and the session that drives them.
Nothing here imports pytest: the plugin and the command line share it.
"""
