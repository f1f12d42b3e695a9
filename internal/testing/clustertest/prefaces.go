package clustertest

// Protocol type bytes of the transport's preface (transport/handshake.go:
// protoRaft, protoRPC). A cluster started on a memnet.Network runs without
// TLS, so they are the first bytes of each connection: select a
// connection's protocol with memnet.FlowFilter{Preface: PrefaceRPC}.
var (
	PrefaceRaft = []byte{0xA1}
	PrefaceRPC  = []byte{0xA2}
)
