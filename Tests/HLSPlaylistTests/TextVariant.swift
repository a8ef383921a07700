import HLSTestSupport
/// Ways of writing the same playlist that a lossless engine must reproduce byte for byte and read the same way.
enum TextVariant: String, CaseIterable, Sendable {
    case asIs
    case crlf
    case bom
    case noFinalNewline
    case trailingSpaces
    case blankLines
    case comments
    case unknownTags
    /// BOM, CRLF, trailing spaces and tabs, blank lines, comments, unknown tags, no final newline.
    case everything

    func apply(to text: String) -> [UInt8] {
        var body = text
        let hadFinalNewline = body.hasSuffix("\n")
        if hadFinalNewline { body.removeLast() }
        var lines = body.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var finalNewline = hadFinalNewline
        var newline = "\n"
        var prefix: [UInt8] = []
        func interleave(_ extra: String) {
            // Never before #EXTM3U, which must stay the first line.
            lines = [lines[0]] + lines.dropFirst().flatMap { [extra, $0] }
        }
        switch self {
        case .asIs: break
        case .crlf: newline = "\r\n"
        case .bom: prefix = [0xEF, 0xBB, 0xBF]
        case .noFinalNewline: finalNewline = false
        case .trailingSpaces: lines = lines.map { $0 + "  " }
        case .blankLines: interleave("")
        case .comments: interleave("# a comment, with URI=\"not-a-uri.ts\"")
        case .unknownTags: interleave("#EXT-X-VENDOR-THING:A=1,B=\"q,r\",URI=\"vendor.m3u8\"")
        case .everything:
            prefix = [0xEF, 0xBB, 0xBF]
            newline = "\r\n"
            finalNewline = false
            lines = lines.map { $0 + " \t" }
            interleave("")
            interleave("#EXT-X-VENDOR-THING:X=\"y\"")
            interleave("## comment")
        }
        var out = prefix
        out.append(contentsOf: lines.joined(separator: newline).utf8)
        if finalNewline { out.append(contentsOf: newline.utf8) }
        return out
    }
}
