import SyncAgent

// First, before the first await: threads that allocate before it each get an arena of their own.
SyncAgent.limitMallocArenas()
SyncAgent.ensureDescriptors()
SyncAgent.answerWithoutThreads()
SyncAgent.ensureTasks()
SyncAgent.pinTimeZone()
// Every command of sync-agent; `image get` execs sync-agent-image, beside this binary.
await SyncAgent.start()
