/// Why a download is started; decides what a ``SharedFetch`` does while no client reads it.
enum FetchPurpose: Sendable, Equatable {
    /// A client's miss: the client reads it.
    case client
    /// Read-ahead of the segments after the one a player asked for: unwatched until a player asks for one, and
    /// cancelled when the player switches to another variant.
    case readAhead
    /// The whole object behind a range relayed from the origin: unwatched, so it goes on only while worth storing.
    case background
}
