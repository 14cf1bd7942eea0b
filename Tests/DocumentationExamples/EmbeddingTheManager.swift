// The guide's "Embedding the manager" setup, as an app writes it: this file imports only what
// the example needs. EmbeddingTheManagerTests runs it.

// snippet:begin embedding-configuration
import ContentSync
import Foundation
import Transport // ClosureRequestAdapter

/// The app's content manager: one per synced folder, kept for as long as the app runs.
func makeContentManager(storage: URL, appSupport: String, token: String) throws(SyncError) -> CacheManager {
    var configuration = SyncConfiguration(
        baseURL: storage, // the folder holding RXCacheConfig/ and RXCacheContent/
        contentDirectory: appSupport + "/content", // replaced at every update: synced files only
        stateDatabasePath: appSupport + "/sync-state.sqlite") // optional; never inside the content folder
    configuration.requestAdapter = ClosureRequestAdapter { request in // optional: runs on every request
        request.headers["Authorization"] = "token \(token)"
    }
    configuration.maxConcurrentDownloads = 4 // optional; default 8
    return try CacheManager(configuration: configuration)
}
// snippet:end embedding-configuration
