// The ItemCache guide's "Sharing a cache folder" examples. SharingACacheFolderTests runs them.
import Foundation
import ItemCache

// snippet:begin cache-folder-workers
/// A worker process of a pool that shares one cache folder: each process opens its own loader
/// on the same folder, for the process's whole life.
func startWorker(cacheFolder: String) throws -> ItemLoader {
    var configuration = CacheConfiguration(folder: cacheFolder)
    configuration.sharing = .group // the workers run as different users of one group
    configuration.loading.coalescingTimeout = .seconds(60) // slow origins: wait longer for another's fetch
    return try ItemLoader(configuration: configuration)
}
// snippet:end cache-folder-workers

// snippet:begin cache-folder-refused
/// Opens the cache a tool only inspects: never makes a folder, and says why one is refused.
func openForInspection(_ folder: String, sharing: FolderSharing = .private) -> ItemStore? {
    var configuration = CacheConfiguration(folder: folder)
    configuration.createsFolder = false
    configuration.sharing = sharing // as the folder's processes share it
    do {
        return try ItemStore(configuration: configuration)
    } catch  where error.code == .folderRefused {
        print(error.message) // not a cache, missing, or writable by others
        return nil
    } catch {
        print(error.message) // permissions, a full disk
        return nil
    }
}
// snippet:end cache-folder-refused
