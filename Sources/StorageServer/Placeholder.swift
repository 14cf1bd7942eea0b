import FlyingFox
enum StorageServerPlaceholder {}
