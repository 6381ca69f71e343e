// Copyright 2026 The cairn Authors.
