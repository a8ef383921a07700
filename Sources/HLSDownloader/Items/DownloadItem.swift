import Foundation

/// One prewarmed stream (docs/design.md §5): what to download, how far it got and why it stopped. A row of the
/// items table; commands and the downloader change it through ``ItemStore``.
package struct DownloadItem: Sendable, Hashable, Codable {
    /// The user's `--id`, or a generated one.
    package var id: String
    /// The origin URL of the master (multivariant) or media playlist.
    package var url: String
    /// Which renditions to download.
    package var selection: RenditionSelection
    /// The media playlist URLs the selection chose (filled when the master has been read).
    package var renditions: [String]
    /// The hlscache (a fleet's load balancer, `http://HOST:PORT`) every resource of the item is requested through,
    /// at its proxy path (keys at `/keys/{id}/…`), so each lands on the node that serves it (`fetch --through`,
    /// the API's `through`); `nil`: straight from the origins. docs/scale-out.md.
    package var through: String?
    /// Seconds to precache from the start of every selected rendition; 0 = the whole stream (0…32767).
    package var precacheSeconds: Int
    /// When the item expires: its state becomes `expired` and its objects are evicted.
    package var expiresAt: Date?
    /// Whether its objects are locked in the store (never evicted).
    package var locked: Bool
    /// Headers sent with every origin request of this item.
    package var headers: [HeaderField]
    /// The current state.
    package var state: ItemState
    /// Why it failed (`failed` state), a ``DownloadError`` code.
    package var errorCode: String?
    /// The detail of the failure.
    package var errorMessage: String?
    /// Bytes stored so far (including resources found already cached).
    package var bytesDone: Int64
    /// Total bytes: an estimate (BANDWIDTH × duration) until the sizes are known, then the real total.
    package var bytesTotal: Int64
    /// Segments stored so far.
    package var segmentsDone: Int
    /// Segments selected.
    package var segmentsTotal: Int
    /// When it was recorded.
    package var createdAt: Date
    /// When it last changed.
    package var updatedAt: Date
    /// When its first run started (a downloader claimed it); `nil` until then.
    package var startedAt: Date?
    /// When it last became `cached` or `partiallyCached`; cleared when it is queued again.
    package var completedAt: Date?
    /// While `idle` after an unavailable origin: since when its runs have been interrupted (the first of the
    /// interruptions in a row); `errorCode` and `errorMessage` say why.
    package var interruptedAt: Date?
    /// While `idle` after an unavailable origin: when a scheduler (`serve`, a waiting `fetch`) tries it again.
    /// `nil` for an item interrupted by a stop (SIGINT, a process gone): it is runnable at once.
    package var nextAttemptAt: Date?
    /// Runs interrupted in a row by an unavailable origin without storing anything (the retry interval doubles
    /// with each); 0 once a run stores something or the item completes or is resumed.
    package var interruptions: Int = 0
    /// Resources of a `cached`, `partiallyCached` or `evicted` item that the cache evicted (or a re-check found
    /// gone) since it completed; 0 once a run completes it again. Not playable offline while above 0.
    package var missingResources: Int = 0
    /// The item's own bandwidth cap in bytes per second (`hlscache set --rate`, PATCH `rate`), within the
    /// process's; applied from its next run. `nil`: only the process's.
    package var rateLimit: Int64?
    /// The item's own maximum size in bytes (`fetch --max-size`, PATCH `maxSize`), in place of `downloads.maxItemSize`.
    package var maxBytes: Int64?
    /// The item's own download hours (`fetch --window`, PATCH `window`), in place of `downloads.window`.
    package var downloadWindow: DownloadWindow?
    /// The item's own daily download volume in bytes (`fetch --daily-limit`, `dailyLimit`): what it may fetch from
    /// origins per day (the day of `downloads.dailyLimit`), counted per item, beside the server-wide limit. From its
    /// next run; `nil`: only the server's.
    package var dailyBytes: Int64?
    /// The speed its running download recorded with its last progress (``TransferRate``); read it with ``speed(at:)``.
    package var storedBytesPerSecond: Double?
    /// A title for people (`fetch --title`); `nil`: none.
    package var title: String?
    /// Tags to find it by (`fetch --tag`, `GET /items?tag=`), in the order given, without duplicates.
    package var tags: [String] = []
    /// A poster image URL (`fetch --poster`): stored with the item, served through the proxy.
    package var posterURL: String?
    /// Why the poster could not be stored at the item's last run (the origin refused it, …): the item is downloaded
    /// without it (artwork is optional); cleared when a run stores it or the poster changes.
    package var posterError: String?
    /// The caller's own JSON object (`fetch --meta`, `"meta"`), as compact JSON text; hlscache never reads it.
    package var metadata: String?
    /// A live recording (`fetch --record`): what it follows and how far it got; `nil` for a prewarm.
    package var record: RecordSpec?
    /// The process downloading it, while `downloading`.
    package var ownerPID: Int32?
    /// The owner's identity beyond its PID (boot id and start time), so a reused PID is not taken for the owner.
    package internal(set) var ownerToken: String?

    /// The longest precache accepted (the seeds' range).
    package static let maxPrecacheSeconds = 32767

    /// A new `queued` item.
    package init(
        id: String, url: String, selection: RenditionSelection = RenditionSelection(), precacheSeconds: Int = 0,
        expiresAt: Date? = nil, locked: Bool = false, headers: [HeaderField] = [], now: Date = Date()
    ) {
        self.id = id
        self.url = url
        self.selection = selection
        self.renditions = []
        self.precacheSeconds = precacheSeconds
        self.expiresAt = expiresAt
        self.locked = locked
        self.headers = headers
        self.state = .queued
        self.bytesDone = 0
        self.bytesTotal = 0
        self.segmentsDone = 0
        self.segmentsTotal = 0
        self.createdAt = now
        self.updatedAt = now
    }

    /// Whether the process recorded as downloading it still runs (the check ``ItemStore/recoverInterrupted()``
    /// makes: the PID with its boot id and start time, a zombie counting as gone); `false` without an owner.
    package var ownerIsAlive: Bool {
        guard let ownerPID else { return false }
        return ProcessIdentity.isAlive(ownerPID, token: ownerToken)
    }

    /// Forgets an interruption by an unavailable origin (the item completed, failed, or was resumed by hand).
    mutating func clearInterruption() {
        interruptedAt = nil
        nextAttemptAt = nil
        interruptions = 0
    }

    /// A fresh id: 12 hex digits.
    package static func generateID() -> String {
        (0..<6).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    /// Whether `id` is acceptable as a user-given id: 1…64 of `[A-Za-z0-9._-]`, but not `.` or `..` — HTTP clients
    /// normalise those path segments away (`/items/../lock` is sent as `/lock`), so the API could not name the item.
    package static func isValidID(_ id: String) -> Bool {
        !id.isEmpty && id.count <= 64 && id != "." && id != ".."
            && id.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0)) }
    }
}

extension DownloadItem {
    /// Its download's speed (bytes per second, the moving average over ``TransferRate/window``) and the seconds
    /// left at that speed, as of `now`: both `nil` unless it is downloading and the speed is known; a download that
    /// stored nothing for a whole window is at 0 (its ETA unknown).
    package func speed(at now: Date = Date()) -> (bytesPerSecond: Double?, etaSeconds: Double?) {
        guard state == .downloading, let stored = storedBytesPerSecond else { return (nil, nil) }
        let seconds = Double(TransferRate.window.components.seconds)
        let rate = now.timeIntervalSince(updatedAt) > seconds ? 0 : stored
        return (rate, DownloadProgress.eta(bytesDone: bytesDone, bytesTotal: bytesTotal, bytesPerSecond: rate))
    }
}
