"""Exit codes of `inferlab run`, chosen apart from ansible-playbook's own (1-5, 99, 250)."""

SUCCESS = 0
PRECONDITION_FAILED = 10  # a precondition failed and nothing was changed
EXPERIMENT_FAILED_RESTORED = 11  # the experiment failed and the restore was verified
RESTORE_UNVERIFIED = 12  # the restore could not be verified: a person must look
USAGE = 13

MEANING = {
    SUCCESS: "success",
    PRECONDITION_FAILED: "a precondition failed and nothing was changed",
    EXPERIMENT_FAILED_RESTORED: "the experiment failed and the restore was verified",
    RESTORE_UNVERIFIED: "the restore could not be verified: a person must look",
    USAGE: "usage error",
}
