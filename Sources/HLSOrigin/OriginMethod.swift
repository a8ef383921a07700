/// The request methods the origin client sends: the cache only ever reads.
package enum OriginMethod: String, Sendable, Hashable {
    case GET
    case HEAD
}
