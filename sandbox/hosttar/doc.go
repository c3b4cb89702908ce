// Package hosttar moves tar streams in and out of host directories without
// letting the archive reach outside them. Extraction goes through package
// dirfd with every symlink refused on the way: entry names must be local,
// no entry may pass through a symlink, each symlink is resolved against
// the links already extracted (and all of them again at the end), so that
// no chain of links leads out, hard links go to regular files only, no
// set-id, sticky or (on the host) world-writable bit is kept, and Options
// bound the bytes and entries. Writing reads through an os.Root; Stream
// hands an archive being written to its reader.
//
// Package sandbox imports it for UploadDir and DownloadDir; the CLI's cp
// and the Harbor trial's log downloads use ExtractWith for its limits;
// providers whose sandboxes are host directories (the fake, the local
// provider's agent inside a sandbox) import it to implement
// driver.TreeUploader and TreeDownloader.
package hosttar
