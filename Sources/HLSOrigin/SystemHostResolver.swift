import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Resolves with the system's `getaddrinfo` (the same resolver the connection uses) on NIO's blocking-I/O
/// thread pool, never on an event loop.
package struct SystemHostResolver: OriginHostResolver {
    /// Creates a resolver.
    package init() {}

    package func resolve(host: String) async throws -> [OriginIPAddress] {
        if let literal = OriginIPAddress(host) { return [literal] }
        return try await NIOThreadPool.singleton.runIfActive { try Self.getaddrinfoBlocking(host) }
    }

    struct ResolutionError: Error, CustomStringConvertible {
        var host: String
        var reason: String
        var description: String { "cannot resolve \(host): \(reason)" }
    }

    static func getaddrinfoBlocking(_ host: String) throws -> [OriginIPAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Darwin)
            hints.ai_socktype = SOCK_STREAM
        #else
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, nil, &hints, &list)
        guard rc == 0, let first = list else {
            throw ResolutionError(host: host, reason: String(cString: gai_strerror(rc)))
        }
        defer { freeaddrinfo(first) }
        var addresses: [OriginIPAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor {
            if let sockaddr = info.pointee.ai_addr {
                switch info.pointee.ai_family {
                case AF_INET:
                    let bytes = sockaddr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                        withUnsafeBytes(of: sin.pointee.sin_addr) { Array($0) }
                    }
                    if let address = OriginIPAddress(bytes: bytes) { addresses.append(address) }
                case AF_INET6:
                    let bytes = sockaddr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                        withUnsafeBytes(of: sin6.pointee.sin6_addr) { Array($0) }
                    }
                    if let address = OriginIPAddress(bytes: bytes) { addresses.append(address) }
                default:
                    break
                }
            }
            cursor = info.pointee.ai_next
        }
        guard !addresses.isEmpty else { throw ResolutionError(host: host, reason: "no addresses") }
        var seen = Set<OriginIPAddress>()
        return addresses.filter { seen.insert($0).inserted }
    }
}
