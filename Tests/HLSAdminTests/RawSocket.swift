import Foundation

#if canImport(Glibc)
    import Glibc
    import HLSTestSupport
#endif

/// Blocking TCP clients for the tests, run on their own threads.
enum RawSocket {
    struct SocketError: Error {}

    /// Connects to 127.0.0.1:`port` (``LoopbackSocket``); returns the descriptor.
    static func connect(port: Int, receiveBuffer: Int32? = nil) throws -> Int32 {
        try LoopbackSocket.connect(port: port, receiveBuffer: receiveBuffer)
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
