import Foundation
import NIOCore
import NIOHTTP1

/// What the generic path does with a body of exactly 16 or 32 bytes, the sizes of AES-128 and AES-256 keys (docs/design.md §7).
///
/// Keys a playlist names are rewritten to `/keys/{id}`, and a registered key's origin URL asked for on the generic
/// path is redirected there. But a key's URL has countless other spellings (`a//k.bin`, `%6b.bin`, an extra query
/// parameter, another name of its host), a key the proxy has not met since it started is not registered, and an
/// origin may redirect anywhere: keys cannot be told by their URL alone. By their size they can. So the generic path
/// never stores a key-sized body (no plaintext key on disk, whatever URL it came by) and sends one only to the
/// clients `/keys/` answers (loopback and `keys.allow`); others get `403 forbidden`. A body of unknown length is held
/// back from such a client until more than 32 bytes have arrived. Nothing a stream needs besides keys is that small.
enum KeySizedBody {
    /// The largest key length: a body of unknown length is held back until it is longer.
    static let largest: Int64 = 32

    /// Whether `length` is the length of an AES-128 key (also SAMPLE-AES, SAMPLE-AES-CTR) or of an AES-256 key.
    /// (Asked up to three times per hit: a comparison, not a lookup in a set.)
    static func isKeySize(_ length: Int64?) -> Bool {
        length == 16 || length == 32
    }

    /// Whether the client of `request` may receive a 16-byte body: the clients `/keys/` answers.
    static func mayReceive(_ request: ProxyRequest, services: ProxyServices) -> Bool {
        KeyEndpoint.allows(request, keys: services.keys)
    }

    /// The answer to a client that may not receive one.
    static var refusal: ProxyError {
        ProxyError.forbidden(
            "a 16- or 32-byte answer is handled as a key: it goes only to the clients allowed keys (loopback and keys.allow, from no web page or an allowed one)"
        )
    }

    /// Whether an origin answer to a GET, whole (200) or a part (206), is of a key-sized resource.
    static func isKeySized(status: Int, headers: HTTPHeaders) -> Bool {
        (status == 200 || status == 206) && isKeySize(totalLength(status: status, headers: headers))
    }

    /// The whole length of an origin answer, from `Content-Length` (200) or the total of `Content-Range` (206).
    private static func totalLength(status: Int, headers: HTTPHeaders) -> Int64? {
        if status == 206 {
            guard let range = headers.first(name: "Content-Range"), let slash = range.lastIndex(of: "/") else { return nil }
            return Int64(range[range.index(after: slash)...].trimmingCharacters(in: .whitespaces))
        }
        return headers.first(name: "Content-Length").flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
    }
}
