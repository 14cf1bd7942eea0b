import GRDB

extension Row {
    /// The value at `index` as `T`; nil when it is NULL or cannot be `T` (a damaged or hostile
    /// row: text where a number belongs, say). GRDB's subscripts stop the process on such a
    /// value, so every read of a table another process could write goes through here.
    package func lenient<T: DatabaseValueConvertible>(_ index: Int) -> T? {
        T.fromDatabaseValue(self[index] as DatabaseValue)
    }
}
