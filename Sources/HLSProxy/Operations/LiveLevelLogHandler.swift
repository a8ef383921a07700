import Logging
import Synchronization

/// A log handler whose level is the process's ``LiveLevelLogHandler/level`` (`log.level`), so a reload changes the
/// level of every logger already made (swift-log loggers are values: each copy keeps its handler's level).
///
/// Setting a logger's level to one above the process's makes it a floor for that logger (the origin client keeps
/// its loggers at debug or above, so AsyncHTTPClient's trace lines never appear); setting it at or below the
/// process's level changes nothing.
package struct LiveLevelLogHandler: LogHandler {
    /// The process's level; ``setLevel(_:)`` changes it.
    package static var level: Logger.Level { levels[shared.load(ordering: .relaxed)] }
    /// The level's place in ``levels``: one word, read by every log call (an atomic, not a lock).
    private static let shared = Atomic<Int>(Logger.Level.allCases.firstIndex(of: .info)!)
    private static let levels = Logger.Level.allCases

    /// Sets the level of every logger of the process made with this handler.
    package static func setLevel(_ level: Logger.Level) {
        shared.store(levels.firstIndex(of: level)!, ordering: .relaxed)
    }

    private var inner: any LogHandler
    private var floor: Logger.Level?

    /// Wraps `inner` (which should not filter by its own level: its level is set to trace).
    package init(_ inner: any LogHandler) {
        self.inner = inner
        self.inner.logLevel = .trace
    }

    package var logLevel: Logger.Level {
        get { max(Self.level, floor ?? .trace) }
        set { floor = newValue > Self.level ? newValue : nil }
    }

    package var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }

    package var metadataProvider: Logger.MetadataProvider? {
        get { inner.metadataProvider }
        set { inner.metadataProvider = newValue }
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }

    package func log(event: LogEvent) {
        inner.log(event: event)
    }
}
