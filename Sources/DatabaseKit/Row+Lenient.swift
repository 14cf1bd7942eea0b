import GRDB

extension Row {
    /// The value at `index` as `T`; nil when it is NULL or cannot be `T` (a damaged or hostile
    /// row: text where a number belongs, say). GRDB's subscripts stop the process on such a
    /// value, so every read of a table another process could write goes through here.
    package func lenient<T: DatabaseValueConvertible>(_ index: Int) -> T? {
        T.fromDatabaseValue(self[index] as DatabaseValue)
    }

    /// The value of `column` as `T`; nil when the column is missing, NULL or cannot be `T`.
    package func lenient<T: DatabaseValueConvertible>(_ column: String) -> T? {
        (self[column] as DatabaseValue?).flatMap { T.fromDatabaseValue($0) }
    }
}

/// A row a damaged or hostile database holds that cannot be read as its record: callers take
/// it as missing.
package struct DamagedRow: Error {
    package let table: String
    package init(table: String) { self.table = table }
}
