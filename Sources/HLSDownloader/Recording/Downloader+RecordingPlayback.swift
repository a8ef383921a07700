import Foundation
import HLSPlaylist

extension Downloader {
    /// Rendition `rendition` of a recording as players get it (``RecordingPlaylist``), URIs through the proxy and keys
    /// through `/keys/`: `EVENT` while it may still grow, `VOD` with `EXT-X-ENDLIST` once it ended or stopped (paused,
    /// failed, complete).
    func recordedMediaPlaylist(_ item: DownloadItem, rendition: Int) throws(DownloadError) -> [UInt8] {
        let rows = try items.recorded(item.id, rendition: rendition)
        let growing = item.record?.ended != true && [.recording, .idle, .queued].contains(item.state)
        let text = RecordingPlaylist.text(rows, ended: !growing)
        let playlist: Playlist
        do {
            playlist = try Playlist(bytes: Array(text.utf8), options: ParseOptions(maxBytes: Int.max))
        } catch {
            throw DownloadError.corrupted.with("the recorded playlist of item \(item.id) is invalid: \(error)")
        }
        return try rewritten(playlist, base: item.renditions[rendition])
    }
}
