import SyncAgent

// Every command of sync-agent; `image get` execs sync-agent-image, beside this binary.
await SyncAgent.start()
