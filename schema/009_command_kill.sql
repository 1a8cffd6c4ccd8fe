-- kill_command: the signal sent to a command is kept, so that its end,
-- whichever request observes it, is recorded as 'killed' when the signal
-- ended it (exit code 128 + a signal) rather than as a plain exit.
ALTER TABLE sandbox_commands ADD COLUMN kill_signal int
    CHECK (kill_signal IS NULL OR kill_signal BETWEEN 1 AND 64);
ALTER TABLE sandbox_commands DROP CONSTRAINT sandbox_commands_state_check;
ALTER TABLE sandbox_commands ADD CONSTRAINT sandbox_commands_state_check
    CHECK (state IN ('running', 'exited', 'timed_out', 'killed', 'failed'));
