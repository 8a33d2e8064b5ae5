"""The stack on the emulator: provisioning, the in-process runtime, ``local up``'s background
process, saved state, state machine executions and the oracles. It imports the emulator, never
the rehearsal tools."""
