import Foundation

#if canImport(Glibc)
    import Glibc
    import HLSTestSupport
#endif

/// Blocking TCP clients for the tests, run on their own threads.
enum RawSocket {
    struct SocketError: Error {}

    /// Connects to 127.0.0.1:`port` with a small receive buffer; returns the descriptor.
    static func connect(port: Int, receiveBuffer: Int32? = nil) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SocketError() }
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
            throw SocketError()
        }
        return fd
    }

    static func send(_ fd: Int32, _ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Sends `request` and reads until the peer closes or `readTimeout` seconds pass without data.
    static func exchange(port: Int, _ request: [UInt8], readTimeout: Int = 5) async throws -> String {
        try await offThread {
            let fd = try connect(port: port)
            defer { close(fd) }
            var timeout = timeval(tv_sec: readTimeout, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            send(fd, request)
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = recv(fd, &buffer, buffer.count, 0)
                guard n > 0 else { break }
                received.append(contentsOf: buffer[0..<n])
            }
            return String(decoding: received, as: UTF8.self)
        }
    }
}
