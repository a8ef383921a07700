#if canImport(Glibc)
    import Glibc
#endif
import NIOCore

/// Blocking TCP connections to 127.0.0.1 for protocol-level tests (raw requests, clients that stall or leave).
package enum LoopbackSocket {
    package struct ConnectFailed: Error {}

    /// Connects to 127.0.0.1:`port` and returns the descriptor (the caller closes it).
    /// - Parameters:
    ///   - receiveBuffer: `SO_RCVBUF`, set before connecting so that it bounds the window (a small one makes the
    ///     server's writes stall as behind a player that stopped reading).
    ///   - readTimeout: `SO_RCVTIMEO` in seconds (a `recv` waiting longer fails).
    package static func connect(port: Int, receiveBuffer: Int32? = nil, readTimeout: Double? = nil) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ConnectFailed() }
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw ConnectFailed()
        }
        if let readTimeout {
            var timeout = timeval(tv_sec: Int(readTimeout), tv_usec: Int((readTimeout - Double(Int(readTimeout))) * 1_000_000))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
        return fd
    }

    /// A socket listening on 127.0.0.1 at a port the system chose (backlog 1): its descriptor (the caller closes it)
    /// and the port.
    package static func listen() throws -> (descriptor: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ConnectFailed() }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && Glibc.listen(fd, 1) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard listening else {
            close(fd)
            throw ConnectFailed()
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// Sends all of `text` on `fd` (blocking; stops at the first failure).
    package static func send(_ text: String, on fd: Int32) {
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            sent += count
        }
    }
}

/// Runs `start` with random free ports below the ephemeral range (32768 and up on Linux) until one binds, for a
/// server that is stopped and started again on the same port: a port of that range can be taken meanwhile by any
/// outgoing connection of the tests running beside it, and the restart then fails with `EADDRINUSE`.
package func startBelowTheEphemeralRange(_ start: (Int) async throws -> Void) async throws {
    for _ in 0..<200 {
        do {
            try await start(Int.random(in: 20_000..<32_000))
            return
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            continue
        }
    }
    try await start(0)
}
