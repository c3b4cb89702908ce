// Package hosttar moves tar streams in and out of host directories without
// letting the archive reach outside them: every file operation goes through
// an os.Root, entry names must be local, symlink targets must stay inside the
// tree, and no entry may pass through a symlink.
//
// Package sandbox imports it for UploadDir and DownloadDir; providers whose
// sandboxes are host directories (the fake, the local provider's upper
// layers) import it to implement driver.TreeUploader and TreeDownloader.
package hosttar
