"""FLOP formulas from op names and input shapes: numpy ops and aten (torch) ops."""
