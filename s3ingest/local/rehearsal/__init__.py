"""The rehearsal tools: scenario files and their steps, incidents, the demo and the scenario
clock, run on the stack."""
