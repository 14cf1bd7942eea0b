enum ContentSyncPlaceholder {}
