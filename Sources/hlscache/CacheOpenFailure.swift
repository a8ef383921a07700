import ArgumentParser
import Foundation
import HLSCacheStore
import HLSDownloader
import HLSKeys

/// A cache directory that cannot be opened (its file system full, a file unreadable, a database damaged): one
/// line on stderr, `hlscache: cacheFull: cannot open the cache in DIR: …`, and the item commands' exit statuses
/// (5 `cacheFull`, 6 `corrupted`), rather than ArgumentParser's usage text and status 64, which mean bad options.
/// An unusable master key is a configuration error instead (`hlscache: config error: …`, 78).
enum CacheOpenFailure {
    /// Writes the line for `error` (opening `what`, e.g. "the cache", in `directory`) and returns the exit to throw.
    static func report(_ what: String, directory: String, _ error: any Error) -> ExitCode {
        let detail: String
        var full = SQLiteFiles.isFileSystemFull(directory)
        switch error {
        case let error as CacheStoreError:
            detail = error.detail.isEmpty ? error.name : error.detail
            full = full || error == .cacheFull
        case let error as DownloadError:
            detail = error.message
            full = full || error.code == DownloadError.cacheFull.code
        case let error as KeyError:
            // A malformed `HLSCACHE_MASTER_KEY` or an unsafe `master.key` is the operator's setting, not damage:
            // said as a configuration error (78), like every other bad setting.
            if error == .masterKey, !full {
                ConsoleOutput.error("hlscache: config error: \(error.message)")
                return ExitCode(78)
            }
            detail = error.message
        default:
            detail = "\(error)"
        }
        let code: DownloadError = full ? .cacheFull : .corrupted
        ConsoleOutput.error("hlscache: \(code.code): cannot open \(what) in \(directory): \(detail)")
        return ExitCode(code.exitStatus)
    }
}
