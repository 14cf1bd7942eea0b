import SyncAgent

// sync-agent-image: sync-agent's command line, with `image get` made here (libvips is loaded by
// this binary alone). sync-agent execs it for `image get`.
SyncAgent.ensureDescriptors()
SyncAgent.answerWithoutThreads()
SyncAgent.ensureTasks()
ImageHelper.implementation.withLock { $0 = { command in try await command.make() } }
await SyncAgent.start()
