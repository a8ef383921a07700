import Foundation
import HLSDownloader
import NIOCore

/// One Server-Sent Event of `GET /api/v1/events` (docs/api.md): item state changes, throttled progress, removals
/// and playback. Encoded as `event: TYPE` + `data: JSON`.
package enum AdminEvent: Sendable, Hashable {
    /// The item is now in `state` (also sent when an item appears).
    case state(id: String, state: ItemState, error: String?)
    /// Counters of a downloading item, and its speed (the moving average, `nil` when not known yet).
    case progress(id: String, bytes: Int64, bytesTotal: Int64, segments: Int, segmentsTotal: Int, bytesPerSecond: Double? = nil)
    /// The cache evicted `resources` of the item's objects (or a re-check found them gone); counters are what is left.
    case evicted(id: String, state: ItemState, resources: Int, bytes: Int64, segments: Int)
    /// The item was removed without keeping its metadata.
    case removed(id: String)
    /// The item's objects were locked or unlocked (its state is unchanged), by this server or another process.
    case locked(id: String, locked: Bool)
    /// A player was served the item's segments through the proxy.
    case played(id: String, lastPlayedAt: Date, servedSeconds: Double)
    /// The download policies changed (`PATCH /policies`): every policy's value now. About no item (`id` is empty).
    case policy(policies: [String: String])
    /// The server started (the first event of every stream; once to webhooks) or is stopping (SIGTERM, SIGINT; the
    /// last event of every stream). About no item (`id` is empty).
    case server(ServerStatus)

    /// The item the event is about.
    package var id: String {
        switch self {
        case .state(let id, _, _), .progress(let id, _, _, _, _, _), .evicted(let id, _, _, _, _), .removed(let id), .played(let id, _, _),
            .locked(let id, _):
            id
        case .policy, .server: ""
        }
    }

    /// Progress (and playback) events may be coalesced or dropped for a slow subscriber; state changes may not.
    var isCoalescable: Bool {
        switch self {
        case .progress, .played: true
        case .state, .evicted, .removed, .locked, .policy, .server: false
        }
    }

    var type: String {
        switch self {
        case .state: "state"
        case .progress: "progress"
        case .evicted: "evicted"
        case .removed: "removed"
        case .locked: "lock"
        case .played: "played"
        case .policy: "policy"
        case .server: "server"
        }
    }

    /// The JSON object of the `data:` line.
    var object: [String: Any] {
        switch self {
        case .state(let id, let state, let error):
            var object: [String: Any] = ["type": "state", "id": id, "state": state.rawValue]
            if let error { object["error"] = error }
            return object
        case .progress(let id, let bytes, let bytesTotal, let segments, let segmentsTotal, let rate):
            var object: [String: Any] = [
                "type": "progress", "id": id, "bytes": bytes, "bytesTotal": bytesTotal, "segments": segments,
                "segmentsTotal": segmentsTotal,
                "percent": AdminJSON.percent(bytes: bytes, bytesTotal: bytesTotal, segments: segments, segmentsTotal: segmentsTotal),
            ]
            let eta = DownloadProgress.eta(bytesDone: bytes, bytesTotal: bytesTotal, bytesPerSecond: rate)
            object.merge(AdminJSON.speed(bytesPerSecond: rate, etaSeconds: eta)) { $1 }
            return object
        case .evicted(let id, let state, let resources, let bytes, let segments):
            return ["type": "evicted", "id": id, "state": state.rawValue, "resources": resources, "bytes": bytes, "segments": segments]
        case .removed(let id):
            return ["type": "removed", "id": id]
        case .locked(let id, let locked):
            return ["type": "lock", "id": id, "locked": locked]
        case .played(let id, let at, let seconds):
            return ["type": "played", "id": id, "lastPlayedAt": AdminJSON.iso(at), "servedSeconds": seconds]
        case .policy(let policies):
            return ["type": "policy", "policies": policies]
        case .server(let status):
            return [
                "type": "server", "event": status.phase.rawValue, "startedAt": AdminJSON.iso(status.startedAt), "pid": Int(status.pid),
                "version": status.version,
            ]
        }
    }

    /// The SSE frame.
    func write(to buffer: inout ByteBuffer) {
        buffer.writeString("event: \(type)\ndata: ")
        buffer.writeString(AdminJSON.string(object))
        buffer.writeString("\n\n")
    }
}

/// What a `server` event says (PCD's `hlsServerStarted`/stopped): the phase, and which server run it is about — a
/// subscriber that reconnects and reads another `startedAt` or `pid` knows the server restarted.
package struct ServerStatus: Sendable, Hashable {
    package enum Phase: String, Sendable, Hashable {
        case started, stopping
    }

    package var phase: Phase
    package var startedAt: Date
    package var pid: Int32
    package var version: String

    package init(phase: Phase, startedAt: Date, pid: Int32, version: String) {
        self.phase = phase
        self.startedAt = startedAt
        self.pid = pid
        self.version = version
    }
}
