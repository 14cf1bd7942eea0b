import FileKit
import Foundation

/// Tells whether some process holds a folder's update lock (``UpdateLock``) without taking it.
///
/// Taking the lock to test it, even shared and for a moment, would make an update that starts
/// in that moment fail as "another update is running". Linux lists every `flock` in
/// `/proc/locks` with the holder's PID and the file's device and inode, so the probe only reads.
enum UpdateLockProbe {
    /// The PID of a process holding the update lock of the folder whose state database is
    /// `statePath` (or its staging folder's lock), or nil when nobody holds either.
    static func holder(statePath: String, stagingRoot: String) -> Int32? {
        LockTable.exclusiveHolder(of: [statePath + ".lock", stagingRoot])
    }
}
