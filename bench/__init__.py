"""Benchmarks: figures and ratios against stated targets, printed, never asserted in tests."""
