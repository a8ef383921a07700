/// The request methods the origin client sends: the cache only ever reads.
public enum OriginMethod: String, Sendable, Hashable {
    case GET
    case HEAD
}
