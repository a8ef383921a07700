import Foundation

/// What a live recording (`fetch --record`, the API's `"record"`) follows and how far it got: the item follows the
/// live media playlists of its renditions and stores each new segment until the end it was given, the origin's
/// `EXT-X-ENDLIST`, or a command. Kept with the item (JSON in the `record` column).
package struct RecordSpec: Sendable, Hashable, Codable {
    /// Media seconds to record (`--duration`); `nil`: no length of its own.
    package var duration: Double?
    /// When to stop (`--until`); `nil`: no end time.
    package var until: Date?
    /// Media seconds recorded (the longest of the renditions).
    package var recordedSeconds: Double = 0
    /// Breaks in the recording: segments that could not be fetched, or left the origin's window while hlscache was
    /// stopped (each a run of missed segments in one rendition).
    package var gaps: Int = 0
    /// Whether the recording ended (duration or end time reached, the origin's `EXT-X-ENDLIST`).
    package var ended: Bool = false

    package init(duration: Double? = nil, until: Date? = nil) {
        self.duration = duration
        self.until = until
    }

    /// Whether `seconds` recorded or `now` reach the end asked for.
    package func isDone(recorded seconds: Double, now: Date) -> Bool {
        if let duration, seconds >= duration { return true }
        if let until, now >= until { return true }
        return false
    }

    /// The recording as the CLI's JSON and the API show it (`record`): what was asked, seconds recorded, segments,
    /// gaps.
    package func summary(segments: Int) -> [String: Any] {
        var object: [String: Any] = [
            "recordedSeconds": (recordedSeconds * 1000).rounded() / 1000, "segments": segments, "gaps": gaps, "ended": ended,
        ]
        if let duration { object["duration"] = duration }
        if let until { object["until"] = until.ISO8601Format() }
        return object
    }
}
