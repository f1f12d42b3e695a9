module github.com/raftlock/raftlock/admin/browsertest

go 1.25.0

replace github.com/raftlock/raftlock => ../..

require (
	github.com/chromedp/chromedp v0.23.0
	github.com/raftlock/raftlock v0.0.0-00010101000000-000000000000
)

require (
	github.com/chromedp/cdproto v0.159.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
)
