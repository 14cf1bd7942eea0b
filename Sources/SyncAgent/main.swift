print("sync-agent")
